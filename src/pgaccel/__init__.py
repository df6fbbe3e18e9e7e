"""pgaccel: probe a PostgreSQL host, tune the whole stack, prove every gain by benchmark."""

__version__ = "0.1.0"
