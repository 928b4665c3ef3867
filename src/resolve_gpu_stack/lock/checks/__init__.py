"""The families of findings ``lock.check`` calls, one module each (see ``lock/check.py``)."""
