"""Pure artifact handling: text in, frozen specs and problems out. Never runs a script."""
