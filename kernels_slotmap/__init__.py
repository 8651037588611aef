"""vLLM's slot-mapping computation (where a scheduled token's key and value land in the
paged KV cache), the third subject of remap-ab. Written from ../shared/FIELD_NOTES.md
("vLLM's slot-mapping computation"); docs/slotmap.md is the contract.

- ``kernels_slotmap.host``: side A, NumPy on the host, per-token request rows and
  positions; writes ``slot_mapping[:num_tokens]`` of the caller's int64 buffer.
- ``kernels_slotmap.device``: side B, one Triton program per request plus one for the
  PAD tail, over ``query_start_loc`` and positions (imports Triton).
- ``kernels_slotmap.oracle``: the per-token formula in plain torch, int64 throughout.
- ``kernels_slotmap.adapter``: one scheduled batch in both calling conventions.

This package imports neither kernel, so importing it loads no Triton.
"""

PAD_SLOT_ID = -1
