import sys

from verlsweep.plan.cli import main

sys.exit(main())
