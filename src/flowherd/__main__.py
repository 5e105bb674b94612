"""``python -m flowherd``: the command line, as the ``flowherd`` command runs it."""

from flowherd.cli import main

raise SystemExit(main())
