import type { Project } from '../config/load.js';
import type { Backend } from '../backend.js';
export async function postgresBackend(_project: Project): Promise<Backend> { throw new Error('not yet'); }
