"""Power: PTDaemon protocol, our daemon, pyvisa analyzer drivers, ranging/testing sessions.

What the campaign flow calls (both run the power run through `bench.execute`, like any run):
    official_run.execute_official  `power: official`: power-dev's server on the director, its
                                   client wrapping LoadGen in the container (wrap), its check
    track.execute_track            `power: track`: subrun's own daemon (never submittable)
    readiness.check_official       refuses official power before any run, naming the key
    lock.analyzer_lock             one run per analyzer at a time (both of the above hold it)

The rooms: protocol (lines and formats), instrument (Yokogawa drivers; the only pyvisa user),
meter + commands + daemon (our PTDaemon-protocol server), client (talks to any such daemon),
phase + session + measure (a ranging/testing session driven from the controller), metric +
plot, service (our daemon as a detached process on a Host), preflight, powerdev (checkout and
server), wrap + check_report (power-dev's client and check around a run), director + official +
relay (power-dev's client on the controller, for runs outside a campaign and their tests).
"""
