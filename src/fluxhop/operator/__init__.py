"""Operator mode: fluxhop as the controller that reconciles the Flux
Operator's ``MiniCluster`` resources in the cluster (``fluxhop operator``).

``reconcile`` does the work as a plain function over the cluster layer (it
renders with ``render`` and applies with ``cluster``, as ``fluxhop create``
does); ``status`` computes what the resource reports; ``handlers`` wires both
into kopf."""
