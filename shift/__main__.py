import sys

from shift.cli import main

sys.exit(main())
