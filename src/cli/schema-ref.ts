// The `$schema` that `routinely init` writes: one that resolves where the file is edited — a
// relative "./…" path when routinely is installed for the project, else the running routinely's
// schema as a file:// URI (why: docs/design.md "The $schema that init writes").

import { readPackageFile } from '../fs/project-files.js';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isFile } from '../config/load.js';

const SCHEMA = join('config', 'routinely.schema.json');
export const INSTALLED_SCHEMA = './node_modules/routinely/config/routinely.schema.json';

export interface SchemaRef {
  ref: string;
  /** Comment lines for the starter, above `$schema`. */
  comment: string[];
}

export function schemaRefFor(projectDir: string, running = runningSchema()): SchemaRef {
  for (let d = projectDir; ; d = dirname(d)) {
    const installed = join(d, 'node_modules', 'routinely', SCHEMA);
    if (isFile(installed)) {
      const rel = relative(projectDir, installed);
      return {
        ref: rel.startsWith('..') ? rel : `./${rel}`,
        comment: ['Editor completion and checks, from the routinely installed in node_modules.'],
      };
    }
    if (dirname(d) === d) break;
  }
  if (running) {
    return {
      ref: pathToFileURL(running).href,
      comment: [
        'Editor completion and checks, from the routinely that wrote this file (this machine only).',
        `Once routinely is a dev dependency (npm install -D routinely), use "${INSTALLED_SCHEMA}".`,
      ],
    };
  }
  return { ref: INSTALLED_SCHEMA, comment: ['Editor completion and checks (after npm install -D routinely).'] };
}

/** The schema file of this routinely: beside the package.json of the package this code is in. */
function runningSchema(): string | null {
  for (let d = dirname(fileURLToPath(import.meta.url)); ; d = dirname(d)) {
    const pkg = join(d, 'package.json');
    if (isFile(pkg) && isFile(join(d, SCHEMA))) {
      try {
        if ((JSON.parse(readPackageFile(pkg)) as { name?: unknown }).name === 'routinely') return join(d, SCHEMA);
      } catch {
        // not our package.json: keep looking
      }
    }
    if (dirname(d) === d) return null;
  }
}
