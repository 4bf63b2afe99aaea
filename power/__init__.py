"""Power: PTDaemon protocol, our daemon, pyvisa analyzer drivers, ranging/testing sessions."""
