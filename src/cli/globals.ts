// The options every command takes, wherever they are given on the command line (program.ts).

export interface GlobalOptions {
  config?: string;
}
