import sys

from remap_ab.cli import main

sys.exit(main())
