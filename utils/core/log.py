"""The pack's logger: every module logs through ``trackoverlay``."""

import logging

LOGGER = logging.getLogger("trackoverlay")
