"""What a GPU call added to a store, as a store of its own that `autotune merge` takes.

    python3 store_delta.py mark STORE > marks.json        # before the call's work
    python3 store_delta.py cut STORE marks.json DELTA      # after: DELTA holds the new rows

The delta keeps the runs, evaluations, repeats, ceilings and baselines stored after the mark,
with the older evaluations that new repeats belong to (merge matches those by their natural
keys and skips them) and the runs those rows name. The returned file is a fraction of the
store, which is larger than a call brings back comfortably.

`autotune data pack --since TIME` makes such a file too where a call measures nothing stored
before it (calls 1, 2 and 7 here: their two repeats are of call 1's own evaluation). It packs
each run with its own evaluations and leaves out the repeats a run made of older ones, as a
committed campaign file should, so a call of `remeasure --again` (session 74's 1,472 repeats)
would come back without its measurements: this script keeps them.
"""

import json
import shutil
import sqlite3
import sys

TABLES = {
    "evaluations": "id",
    "repeats": "rowid",
    "ceilings": "id",
    "baselines": "id",
    "runs": "id",
}


def mark(store: str) -> None:
    db = sqlite3.connect(store)
    print(
        json.dumps(
            {
                t: db.execute(f"select coalesce(max({c}), 0) from {t}").fetchone()[0]
                for t, c in TABLES.items()
            }
        )
    )


def cut(store: str, marks_file: str, delta: str) -> None:
    marks = json.load(open(marks_file))
    sqlite3.connect(store).execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(store, delta)
    db = sqlite3.connect(delta)
    db.executescript(f"""
        delete from repeats where rowid <= {marks["repeats"]};
        delete from evaluations where id <= {marks["evaluations"]}
            and id not in (select evaluation_id from repeats);
        delete from observations where evaluation_id not in (select id from evaluations);
        delete from ceilings where id <= {marks["ceilings"]};
        delete from baselines where id <= {marks["baselines"]};
        delete from baseline_observations where baseline_id not in (select id from baselines);
        delete from claims;
        delete from runs where id <= {marks["runs"]} and id not in
            (select run_id from evaluations union select run_id from repeats);
    """)
    db.commit()
    counts = {t: db.execute(f"select count(*) from {t}").fetchone()[0] for t in TABLES}
    db.execute("vacuum")
    db.close()
    print("delta:", ", ".join(f"{t} {n}" for t, n in counts.items()))


if __name__ == "__main__":
    {"mark": lambda a: mark(*a), "cut": lambda a: cut(*a)}[sys.argv[1]](sys.argv[2:])
