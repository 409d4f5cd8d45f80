"""Entry point; filled in by the CLI work."""


def main() -> int:
    return 0
