// The database schema, as versioned migrations (applied by migrate() in connect.ts, with the
// statements below). Every table is keyed by the project name, so several projects can share
// one database. Every other statement is in statements.ts.

export interface Migration {
  version: number;
  sql: string;
}

// routinely 0.1.0 was never published: the schema's first version is what it had until then.
// Each later change is a new entry here, applied by migrate() to databases at an older version.
export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    // json, not jsonb: jsonb stores keys in its own order (shorter first), so JSON read back would
    // differ from what the file backend shows; json keeps the text as written.
    sql: `
      -- Failover (docs/postgres.md "Production topologies"): the server's timeline, read from
      -- its current WAL file name (the first 8 hex digits). A promoted standby starts a new
      -- timeline; every lease records the timeline it was granted on, and holds only there.
      CREATE FUNCTION routinely_timeline() RETURNS integer LANGUAGE sql VOLATILE AS
        $fn$ SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::integer $fn$;
      -- When this database first saw each timeline: no lease is granted on a timeline above 1
      -- until one TTL after that, so every lease of the timeline before has run out.
      CREATE TABLE routinely_timelines (
        timeline   integer     PRIMARY KEY,
        first_seen timestamptz NOT NULL DEFAULT now()
      );
      -- One row per (project, key). The row outlives its holders, so epoch (the fencing token)
      -- keeps increasing across releases, crashes and reclaims.
      CREATE TABLE routinely_leases (
        project      text        NOT NULL,
        key          text        NOT NULL,
        lock_id      text        NOT NULL,
        epoch        bigint      NOT NULL,
        owner        json        NOT NULL,
        created_at   timestamptz NOT NULL,
        heartbeat_at timestamptz NOT NULL,
        expires_at   timestamptz NOT NULL,
        released_at  timestamptz,
        timeline     integer     NOT NULL DEFAULT routinely_timeline(),
        PRIMARY KEY (project, key)
      );
      CREATE TABLE routinely_registry (
        project    text        PRIMARY KEY,
        registry   json        NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      -- A run: its snapshot plus the events appended since (snapshot.events_seq). created_seq is
      -- the order runs were created in, by the database: run ids carry a host's clock, so with
      -- skewed hosts the "newest" by id is not the newest run; exec resume and exec runs go by it.
      CREATE SEQUENCE routinely_runs_created_seq;
      CREATE TABLE routinely_runs (
        project     text        NOT NULL,
        run_id      text        NOT NULL,
        snapshot    json        NOT NULL,
        generation  bigint      NOT NULL,
        events_seq  bigint      NOT NULL DEFAULT 0,
        updated_at  timestamptz NOT NULL DEFAULT now(),
        created_seq bigint      NOT NULL DEFAULT nextval('routinely_runs_created_seq'),
        created_at  timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (project, run_id)
      );
      ALTER SEQUENCE routinely_runs_created_seq OWNED BY routinely_runs.created_seq;
      CREATE INDEX routinely_runs_created ON routinely_runs (project, created_seq);
      CREATE TABLE routinely_run_events (
        seq     bigserial PRIMARY KEY,
        project text      NOT NULL,
        run_id  text      NOT NULL,
        gen     bigint    NOT NULL,
        event   json      NOT NULL
      );
      CREATE INDEX routinely_run_events_run ON routinely_run_events (project, run_id, seq);
      CREATE TABLE routinely_routine_state (
        project text NOT NULL,
        routine text NOT NULL,
        record  json NOT NULL,
        PRIMARY KEY (project, routine)
      );
      CREATE TABLE routinely_history (
        seq     bigserial PRIMARY KEY,
        project text      NOT NULL,
        routine text      NOT NULL,
        entry   json      NOT NULL
      );
      CREATE INDEX routinely_history_routine ON routinely_history (project, routine, seq);
      -- Each scheduled time of each routine is fired by exactly one scheduler across hosts.
      CREATE TABLE routinely_ticks (
        project      text        NOT NULL,
        routine      text        NOT NULL,
        scheduled_at timestamptz NOT NULL,
        host         text        NOT NULL,
        claimed_at   timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (project, routine, scheduled_at)
      );
    `,
  },
  {
    version: 2,
    sql: `
      -- Each scheduler's phases of its routines' fires (delayed, queued, waiting: state/phases.ts),
      -- one row per host, replaced as they change; read only while that host's scheduler lease
      -- is held.
      CREATE TABLE routinely_phases (
        project    text        NOT NULL,
        host       text        NOT NULL,
        board      json        NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (project, host)
      );
    `,
  },
  {
    version: 3,
    sql: `
      -- Who waits for which lock, in arrival order (lock/line.ts): a row per waiter while it
      -- waits, its beat renewed each refresh; rows of waiters that are gone are removed by the
      -- waiters that see them.
      CREATE TABLE routinely_line (
        project    text        NOT NULL,
        lock       text        NOT NULL,
        ticket     text        NOT NULL,
        arrived_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        beat_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
        owner      json        NOT NULL,
        PRIMARY KEY (project, lock, ticket)
      );
    `,
  },
  {
    version: 4,
    sql: `
      -- Forgetting claims older than a day reads only those (the primary key starts with the
      -- routine, so without this every claim of the project was scanned: 0.5-3.8 s a prune with
      -- a day of 20 per-second routines).
      CREATE INDEX IF NOT EXISTS routinely_ticks_age ON routinely_ticks (project, scheduled_at);
    `,
  },
  {
    version: 5,
    sql: `
      -- Who holds each claim (the scheduler lease's lock_id: a claimer whose lease is not held
      -- any more is gone) and whether its tick is settled (a fire opened, or a record written).
      -- An unsettled claim of a claimer that is gone is taken over by a live scheduler
      -- (scheduler/claims.ts); a claim retried after a lost answer is recognised as its own.
      -- Claims made before this version are settled: nothing takes them over.
      ALTER TABLE routinely_ticks ADD COLUMN IF NOT EXISTS claimer text,
        ADD COLUMN IF NOT EXISTS settled boolean NOT NULL DEFAULT true;
      CREATE INDEX IF NOT EXISTS routinely_ticks_unsettled ON routinely_ticks (project, scheduled_at) WHERE NOT settled;
    `,
  },
];

/** Generations order by timeline first (SPEC §4.7 across a failover): the first lease on
 * timeline t is above 2^32·(t−1), above any generation of an earlier timeline, even one whose
 * last grants never reached the standby that was promoted. */
export const TIMELINE_GENERATIONS = 4_294_967_296;

/** The statements of migrate() (connect.ts). */
export const schemaSql = {
  /** Whether the schema table exists, and whether the server is a standby (asked before anything else). */
  present: { text: `SELECT to_regclass('routinely_schema') IS NOT NULL AS ok, pg_is_in_recovery() AS standby` },
  version: { text: 'SELECT max(version) AS v FROM routinely_schema' },
  /** Transaction-scoped: nothing stays locked in a pooler's server connection afterwards. */
  lock: (key: number) => ({ text: 'SELECT pg_advisory_xact_lock($1)', values: [key] }),
  versions: {
    text: 'CREATE TABLE IF NOT EXISTS routinely_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
  },
  applied: (version: number) => ({ text: 'INSERT INTO routinely_schema (version) VALUES ($1)', values: [version] }),
  migration: (m: Migration) => ({ text: m.sql }),
};
