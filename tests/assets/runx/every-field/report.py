import json
import os
import sys

topic, notes = sys.argv[1], sys.argv[2]
print(
    json.dumps(
        {
            "topic": topic,
            "notes_lines": len(notes.splitlines()),
            "mode": os.environ.get("REPORT_MODE"),
            "has_key": "REPORTER_API_KEY" in os.environ,
        }
    )
)
