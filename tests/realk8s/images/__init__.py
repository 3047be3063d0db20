"""The images the real nodes pull: built here from Debian, served by a
registry (distribution) the test cluster runs. ``build.py`` makes them,
``oci.py`` writes and pushes OCI images, ``registry.py`` serves them."""
