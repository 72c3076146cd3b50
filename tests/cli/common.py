"""What the command-line tests share: running `transformer ARGV` in this process."""

from transformer.cli import main


def run(argv, capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `transformer ARGV`, run in this process."""
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err
