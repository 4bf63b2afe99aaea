"""System description collectors: a command plus a pure parser per topic."""
