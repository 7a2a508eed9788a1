"""Screenshot a `kernelstrain report` page in headless chromium (docs/report_screenshot.png).

    python3 scripts/report_screenshot.py report.html docs/report_screenshot.png [--width 1280] [--step 3]

Needs Debian's chromium and chromium-driver. --step clicks that step of the first episode
so the browser's feedback and diff panes show a real change."""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import chromedriver  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report")
    p.add_argument("out")
    p.add_argument("--width", type=int, default=1280)
    p.add_argument("--step", type=int, default=2)
    a = p.parse_args()
    if chromedriver.missing():
        print(chromedriver.missing(), file=sys.stderr)
        return 2
    with chromedriver.Browser(a.width, 900) as b:
        b.get(Path(a.report).resolve().as_uri())
        b.run("var r = document.querySelectorAll('#steps-table tbody tr'); if (r.length > arguments[0]) "
              "r[arguments[0]].click();", a.step - 1)
        height = b.run("return document.documentElement.scrollHeight")
        b.resize(a.width, height + 40)
        Path(a.out).write_bytes(b.screenshot())
        print(f"{a.out}: {a.width}x{height}; console: {b.console() or 'no messages'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
