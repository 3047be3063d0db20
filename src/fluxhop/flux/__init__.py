"""Pure Flux file formats: hostlists, idsets, durations, CURVE certificates,
broker configuration, resource sets (R) and jobspecs.

Nothing in this package does I/O beyond what a caller asks for explicitly
(``set_attribute`` with a ``^file`` value); nothing here knows Kubernetes.
"""
