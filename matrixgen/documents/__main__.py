"""`python -m matrixgen.documents`: write the published JSON Schemas (schema/)."""

import sys

from matrixgen.documents.published import main

sys.exit(main())
