"""The Linux layer, in one place: every OS value pgaccel reads or changes.

* ``procfs``: the one parser of each kernel file format (/proc/meminfo, /proc/PID/smaps,
  bracketed sysfs modes such as THP's ``always [madvise] never``); pure.
* ``knob``: the operations on one value — where it lives (``key_path``), read, write,
  verify (``same``), restore (``write_back``), and the exclusive ``*_bytes``/``*_ratio``
  pairs — the only code that opens these files.
* ``apply``: a tuning plan's Linux changes (``tune --apply-os``): plan, write with read-back,
  undo on failure, restore from the state manifest.
* ``state``: ``OsState``, the values a lab variant or ``run --stack`` holds for a
  measurement (huge page pools of any size, THP, sysctls, sysfs), put back afterwards.
* ``journal``: each original value journaled before its first change, so a run killed with
  kill -9 has it put back at pgaccel's next start.
* ``hugepages``: what a variant claims about huge pages and what a server's memory map
  says (pure).
"""
