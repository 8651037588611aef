"""What a recorder (``remap_ab/traces/recorder.py``) wraps of the remap: its functions,
the module vLLM looks them up in, which parameters are inputs and which caller buffers.
Names only, importing nothing: the recorder reads them in the process it records in.
A recorded call becomes a case in ``trace_case.py``.
"""

# The SPEC §1 functions, by the CaseConfig mode that calls them.
FUNCTIONS = {
    "triton_convert_req_index_to_global_index": "convert",
    "triton_filter_and_convert_dcp_index": "dcp",
}
# Where vLLM's sparse-MLA backends look the two functions up.
DEFAULT_MODULE = "vllm.v1.attention.backends.mla.sparse_utils"
# Input tensors a call's values are recorded of (SPEC §2).
INPUTS = ("req_id", "block_table", "token_indices", "prefill_workspace_request_ids", "prefill_workspace_starts")
# Caller-owned outputs (SPEC §10, every keyword a fork uses): written by the call, so
# only their shape, strides and dtype are recorded, never their values.
BUFFERS = ("out", "valid_counts_out", "output", "valid_counts")


