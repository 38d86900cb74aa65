export * from './guards.js';
export * from './observe.js';
export * from './planner.js';
export * from './surge.js';
