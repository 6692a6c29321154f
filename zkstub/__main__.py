import sys

from zkstub.cli import main

sys.exit(main())
