import sys

from matrixgen.cli.main import main

sys.exit(main())
