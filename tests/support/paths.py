"""Where the tests find the project and their data, wherever a test module lies in tests/."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SAMPLE_DATA = ROOT / "sample_data"
CHAT_TEMPLATES = TESTS / "support" / "chat_templates"
