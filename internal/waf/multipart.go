package waf

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"strconv"

	"github.com/corazawaf/coraza/v3/experimental/plugins"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
)

// multipartProcessor is the body processor multipart/form-data bodies
// get instead of Coraza's own, which writes every file part to a
// temporary file: an edge proxy should not touch the disk per request,
// nor fail its inspection where the disk is read-only. It fills what the
// preconfigured sets' rules read (ARGS_POST, FILES, FILES_NAMES,
// FILES_SIZES, MULTIPART_NAME, MULTIPART_FILENAME) and discards file
// contents, which no rule of those sets reads.
const multipartProcessor = "spillwaymultipart"

// txArgsCut is the TX variable multipartBodyProcessor sets when it left
// fields out (Coraza's ARGUMENTS_LIMIT_REACHED cannot be set from a
// plugin); the rule ruleArgsLimit reads both.
const txArgsCut = "spillway_args_cut"

// Registering a body processor is Coraza's plugin mechanism: a name in
// its registry, written once here and only read afterwards.
func init() {
	plugins.RegisterBodyProcessor(multipartProcessor, func() plugintypes.BodyProcessor {
		return multipartBodyProcessor{}
	})
}

type multipartBodyProcessor struct{}

// ProcessRequest reads the parts of a multipart/form-data body (a prefix
// of it, at most Options.MaxBodyBytes: the last part may be cut, and is
// read as far as it goes), at most ArgumentLimit of them. A body with no
// readable part is one argument, inspected whole, so that a body a
// lenient backend would still parse is not waved through.
func (multipartBodyProcessor) ProcessRequest(r io.Reader, v plugintypes.TransactionVariables, o plugintypes.BodyProcessorOptions) error {
	body, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, params, err := mime.ParseMediaType(o.Mime)
	if err != nil || params["boundary"] == "" {
		v.ArgsPost().Add("", string(body))
		return nil
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for n := 0; ; n++ {
		p, err := mr.NextPart()
		if err != nil {
			if n == 0 {
				v.ArgsPost().Add("", string(body))
			}
			return nil // the end, or a part cut or malformed: what was read is inspected
		}
		if n == o.ArgumentLimit {
			v.TX().Set(txArgsCut, []string{"1"})
			return nil
		}
		if err := addPart(p, v); err != nil {
			return err
		}
	}
}

// addPart records one part: a field's value as an argument, a file's
// name, field name and size.
func addPart(p *multipart.Part, v plugintypes.TransactionVariables) error {
	name := p.FormName()
	v.MultipartName().Add(name, name)
	_, params, _ := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	filename := params["filename"] // not p.FileName(): it drops the path
	if filename == "" {
		data, err := io.ReadAll(p)
		v.ArgsPost().Add(name, string(data))
		return cutIsFine(err)
	}
	size, err := io.Copy(io.Discard, p)
	v.MultipartFilename().Add(name, filename)
	v.Files().Add("", filename)
	v.FilesNames().Add("", name)
	v.FilesSizes().SetIndex(filename, 0, strconv.FormatInt(size, 10))
	return cutIsFine(err)
}

// cutIsFine ignores the error of a part cut at the end of the inspected
// prefix.
func cutIsFine(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return err
}

// ProcessResponse is not used: responses are not inspected.
func (multipartBodyProcessor) ProcessResponse(io.Reader, plugintypes.TransactionVariables, plugintypes.BodyProcessorOptions) error {
	return nil
}
