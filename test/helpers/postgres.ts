// The throwaway PostgreSQL cluster of the tests (shared with the benchmarks).
export {
  destroyCluster,
  findPgBin,
  pgCommand,
  startCluster,
  startServer,
  stopServer,
  type TestCluster,
} from '../../scripts/pg-cluster.mjs';
