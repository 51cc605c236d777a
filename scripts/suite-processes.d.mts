export declare const SUITE_VAR: string;
export interface SuiteProcess {
  pid: number;
  start: string;
  tag: string;
  cmdline: string;
}
export declare function startTimeOf(pid: number): string | null;
export declare function runTag(root: string, pid?: number): string;
export declare function runAlive(tag: string): boolean;
export declare function processesOf(match: (tag: string) => boolean, exclude?: number[]): SuiteProcess[];
export declare function sweep(match: (tag: string) => boolean, exclude?: number[]): SuiteProcess[];
export declare function sweepEarlierRuns(tag: string): SuiteProcess[];
