"""An implementation with one discarded out-of-bounds read, for the memcheck tests
(CPU and GPU) and for trying --memcheck by hand:

    python3 tests/memcheck_support.py /tmp/oobpkg row_end    # writes /tmp/oobpkg/oob_remap_row_end
    PYTHONPATH=/tmp/oobpkg remap-ab run --a old --b oob_remap_row_end --memcheck ...
"""

import itertools
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The line of kernels_old that reads the block table; the out-of-bounds variants add a
# second read right after it whose value nothing uses.
BASE_LOAD = "    base = tl.load(block_table_ptr + req * bt_stride0 + blk * bt_stride1, mask=load_mask, other=0)\n"
OOB_READS = {
    # The entry just after the row's last block: past the table's end for the last request.
    "row_end": "    past_end = tl.load(block_table_ptr + req * bt_stride0 + max_num_blocks_per_req * bt_stride1, volatile=True)\n",
    # Every loaded lane also reads the next block: off the end where blk == W - 1.
    "next_block": "    past_end = tl.load(block_table_ptr + req * bt_stride0 + (blk + 1) * bt_stride1, mask=load_mask, volatile=True)\n",
}
_counter = itertools.count()


def write_oob_package(folder: Path, variant: str, name: str) -> Path:
    """``folder/name``: a copy of kernels_old with the ``variant`` read added."""
    package = Path(folder) / name
    shutil.copytree(ROOT / "kernels_old", package, ignore=shutil.ignore_patterns("__pycache__"))
    source = (package / "_remap.py").read_text()
    assert source.count(BASE_LOAD) == 1
    (package / "_remap.py").write_text(source.replace(BASE_LOAD, BASE_LOAD + OOB_READS[variant]))
    init = (package / "__init__.py").read_text()
    (package / "__init__.py").write_text(init.replace("kernels_old", name))
    return package


def oob_implementation(tmp_path, monkeypatch, variant: str) -> str:
    """A fresh importable copy (unique name: the registry caches by name); returns its module name."""
    name = f"oob_remap_{variant}_{next(_counter)}"
    write_oob_package(tmp_path, variant, name)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


if __name__ == "__main__":
    dest, variant = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "row_end"
    print(write_oob_package(Path(dest), variant, f"oob_remap_{variant}"))


