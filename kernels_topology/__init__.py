"""The topology-witness merge (vLLM PR #47942), the second subject of remap-ab.

Two implementations with the same public entry point,
``fused_topology_witness_merge(learned, context_lens, num_segments, learned_keep,
max_replacements)``:

- ``kernels_topology.torch_pair``: side A, two vectorised torch functions
  (``topology_witnesses`` and ``merge_topology_witnesses``);
- ``kernels_topology.fused``: side B, one Triton program per row (imports Triton).

Written from the description in issue 42; the contract is docs/topology.md. This
package imports neither implementation, so importing it loads no Triton.
"""
