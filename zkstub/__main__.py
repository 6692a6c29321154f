import sys

from zkstub._cli import main

sys.exit(main())
