import sys

from matrixgen.cli import main

sys.exit(main())
