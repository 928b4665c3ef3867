"""What the tests share: loopback servers, worlds of tiny real wheels, compiled objects, the CLI runner.

Every test folder imports from here (``from support.server import IndexServer``); ``tests/conftest.py``
puts ``tests/`` on ``sys.path`` and holds the fixtures the folders share.
"""
