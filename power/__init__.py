"""Power: PTDaemon protocol, our daemon, pyvisa analyzer drivers, ranging/testing sessions.

What the campaign flow calls:
    measure.measure_power     subrun's own path (tracking, CI; never submittable)
    director.measure_official SPEC PTDaemon behind the unmodified power-dev server and client
    lock.analyzer_lock        one run per analyzer at a time (both of the above hold it)

The rooms: protocol (lines and formats), instrument (Yokogawa drivers; the only pyvisa user),
meter + commands + daemon (our PTDaemon-protocol server), client (talks to any such daemon),
phase + session (ranging then testing), metric + plot, service (our daemon as a detached
process on a Host), preflight, powerdev + official + relay (the official path).
"""
