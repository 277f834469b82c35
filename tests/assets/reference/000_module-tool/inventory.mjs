export default function () { return {count: 0}; }
