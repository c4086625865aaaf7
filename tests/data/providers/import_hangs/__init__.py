"""A plugin folder whose import never ends (a download that waits forever)."""

import time

time.sleep(600)
