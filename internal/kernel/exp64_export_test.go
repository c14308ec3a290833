package kernel

// Exp64sGeneric is the portable Exp64s, for the external tests.
var Exp64sGeneric = exp64sGeneric
