"""``python -m treadle``: the ``treadle`` command, where its console script is not on the path.

The same command line as the script (``treadle._cli._app:main``); its
help and errors name it ``python -m treadle``. Only run as a program:
``import treadle`` never loads it.
"""

from treadle._cli._app import main

if __name__ == "__main__":
    main()
