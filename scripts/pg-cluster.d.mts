export interface TestCluster {
  url: string;
  dataDir: string;
  bin: string;
  runAs: string | null;
}
export function findPgBin(): string | null;
export function pgCommand(cluster: Pick<TestCluster, 'bin' | 'runAs'>, tool: string, args: string[]): string;
export function startCluster(): Promise<TestCluster>;
export function startServer(cluster: TestCluster): void;
export function stopServer(cluster: TestCluster, mode?: 'fast' | 'immediate'): void;
export function destroyCluster(cluster: TestCluster): void;
