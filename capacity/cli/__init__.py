"""One module per `python -m capacity` command; argparse lives only here."""
