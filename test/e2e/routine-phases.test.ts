// A fire before it runs, in every view (SPEC §6; issue 48): queued behind a routine in the
// scheduler's queue for its lock, waiting for its lock held by someone else, running. Each view
// is asked from outside right after the scheduler says so — routine list (text and --json),
// /api/routines, the page — and each says the same; when the fire runs, and when the scheduler is
// gone, no view shows a phase any longer. The file backend here; PostgreSQL in pg-phases.test.ts
// (test/helpers/phases.ts holds both).

import { phaseTests } from '../helpers/phases.js';

phaseTests(null);
