// The phases of fires in every view (issue 48) with PostgreSQL: each scheduler's board in the
// database, believed while its lease is held and its process (on this host) lives. The scenarios
// are test/helpers/phases.ts; the file backend's are routine-phases.test.ts.

import { describe } from 'vitest';
import { pgCluster } from '../helpers/pg-test.js';
import { phaseTests } from '../helpers/phases.js';

const cluster = pgCluster();
if (cluster) phaseTests(cluster);
else describe.skip('phases with PostgreSQL: skipped only outside CI, where no server could be started', () => {});
