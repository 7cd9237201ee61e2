-- allot ledger v18, PostgreSQL: period deadlines (docs/design.md, "Period
-- deadlines"; issue 28). Text keys use the "C" collation, as in 0001.
--
-- deadline_declarations: one row per pipeline that declared a deadline:
-- the deadline as the workers read it (spec, pipeline.DeadlineSpec), when
-- a worker first read it (declared_at) and when it last changed
-- (changed_at). Only periods due after changed_at are judged: a deadline
-- never judges a period retroactively.
CREATE TABLE deadline_declarations (
    pipeline    TEXT COLLATE "C" NOT NULL PRIMARY KEY CHECK (pipeline <> ''),
    spec        TEXT COLLATE "C" NOT NULL CHECK (spec <> ''),
    declared_at TIMESTAMPTZ      NOT NULL,
    changed_at  TIMESTAMPTZ      NOT NULL
);

-- deadline_records: what each judged period came to, once per (pipeline,
-- period, kind): a warning or a late period (cause, detail, episode_id
-- and command say why and what moves it on), a period on time, and a late
-- period that completed afterwards (completed_at, late_by_seconds).
-- needed and completed count the period's completed episodes at the
-- time.
CREATE TABLE deadline_records (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    pipeline        TEXT COLLATE "C" NOT NULL CHECK (pipeline <> ''),
    period          TEXT COLLATE "C" NOT NULL CHECK (period <> ''),
    kind            TEXT COLLATE "C" NOT NULL CHECK (kind IN ('warning', 'late', 'on_time', 'completed_late')),
    due_at          TIMESTAMPTZ      NOT NULL,
    needed          INTEGER          NOT NULL CHECK (needed > 0),
    completed       INTEGER          NOT NULL CHECK (completed >= 0),
    cause           TEXT COLLATE "C" NOT NULL DEFAULT '',
    detail          TEXT             NOT NULL DEFAULT '',
    episode_id      TEXT COLLATE "C" NOT NULL DEFAULT '',
    command         TEXT             NOT NULL DEFAULT '',
    completed_at    TIMESTAMPTZ,
    late_by_seconds BIGINT           NOT NULL DEFAULT 0 CHECK (late_by_seconds >= 0),
    recorded_at     TIMESTAMPTZ      NOT NULL,
    UNIQUE (pipeline, period, kind)
);
-- A pipeline's records by deadline (runs, stats, the watcher's last
-- judged deadline), and the late periods still short (check, metrics).
CREATE INDEX deadline_records_by_due ON deadline_records (pipeline, due_at, kind);

-- A period's runs, which a judgement reads for its cause (catch-up skips,
-- runs skipped for want of an input). The period leads, so that the
-- queries of a pipeline's runs by time keep run_outcomes_pipeline_recorded.
CREATE INDEX run_outcomes_by_period ON run_outcomes (period, pipeline);

-- Episodes by nominal time: the forecast counts a pipeline's episodes of a
-- budget period that have reserved nothing yet. The time leads, so that
-- the queries of a pipeline's episodes by creation keep their index.
CREATE INDEX episodes_by_nominal ON episodes (nominal_time, pipeline);
