package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/auth"
	"github.com/haleproject/hale/internal/image"
)

// Endpoints of the node image registry, behind `hale image` (docs/images.md). They are hale's
// own, SigV4-signed as the API, because images have no SageMaker operation (EC2 keeps AMIs).
const (
	// ImagesPath: GET answers an ImageList (needs sagemaker:ListClusters); POST an image.Spec
	// starts a build and answers its Building manifest (needs sagemaker:CreateCluster).
	ImagesPath = "/hale/images"
	// ImagePath + ID: GET answers an ImageDescription (needs sagemaker:ListClusters); the query
	// parameter log-from=N asks for the build log from line N on.
	ImagePath = "/hale/images/"
	// ImagesDeletePath: POST an ImageDelete (needs sagemaker:DeleteCluster); an image an
	// instance group uses is refused with ResourceInUse.
	ImagesDeletePath = "/hale/images/delete"
)

// ImageList is every image of the server, oldest first, each its whole manifest:
// {"Images": [{"ImageId": …, "Name": …, "Status": …, "Installed": {…}}, …]}.
type ImageList struct {
	Images []*image.Manifest `json:"Images"`
}

// ImageDescription is one image's manifest and the lines of its build log from the asked line
// on (LogNext is the line to ask for next).
type ImageDescription struct {
	Image   *image.Manifest `json:"Image"`
	Log     []string        `json:"Log,omitempty"`
	LogNext int             `json:"LogNext"`
}

// ImageDelete names the image to delete.
type ImageDelete struct {
	ImageID string `json:"ImageId"`
}

// imageError turns the registry's errors into the API's codes.
func imageError(err error) error {
	switch {
	case errors.Is(err, image.ErrNotFound):
		return api.Errorf(api.CodeResourceNotFound, "%v", err)
	case errors.Is(err, image.ErrInUse):
		return api.Errorf(api.CodeResourceInUse, "%v", err)
	case errors.Is(err, image.ErrBusy):
		return api.Errorf(api.CodeConflictException, "%v", err)
	case errors.Is(err, image.ErrInvalid):
		return api.Errorf(api.CodeValidationException, "%v", err)
	}
	return err
}

// serveImages answers the image endpoints; users lists an image's users (service.ImageUsers).
func (h *Handler) serveImages(w http.ResponseWriter, r *http.Request, reg *image.Registry, users image.Users) {
	var ans any
	err := func() error {
		key, body, err := h.verifiedBody(r)
		if err != nil {
			return err
		}
		need := "sagemaker:ListClusters"
		switch {
		case r.Method == http.MethodPost && r.URL.Path == ImagesDeletePath:
			need = "sagemaker:DeleteCluster"
		case r.Method == http.MethodPost:
			need = "sagemaker:CreateCluster"
		}
		if !auth.Allows(key, need) {
			return auth.AccessDenied(key, need, "*")
		}
		if reg == nil {
			return api.Errorf(api.CodeValidationException, "this hale server keeps no images")
		}
		switch {
		case r.Method == http.MethodGet && r.URL.Path == ImagesPath:
			ans = ImageList{Images: reg.List()}
		case r.Method == http.MethodGet:
			id := r.PathValue("id")
			m, err := reg.Get(id)
			if err != nil {
				return imageError(err)
			}
			d := ImageDescription{Image: m}
			if s := r.URL.Query().Get("log-from"); s != "" {
				from, err := strconv.Atoi(s)
				if err != nil || from < 0 {
					return api.Errorf(api.CodeValidationException, "log-from: a line number, 0 or more")
				}
				if d.Log, d.LogNext, err = reg.Log(id, from); err != nil {
					return err
				}
			}
			ans = d
		case r.URL.Path == ImagesDeletePath:
			var in ImageDelete
			if err := json.Unmarshal(body, &in); err != nil || in.ImageID == "" {
				return api.Errorf(api.CodeValidationException, "ImageId: required")
			}
			if err := reg.Delete(r.Context(), in.ImageID, users); err != nil {
				return imageError(err)
			}
			ans = struct{}{}
		default:
			var spec image.Spec
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&spec); err != nil {
				return api.Errorf(api.CodeValidationException, "image spec: %v (members: Name, Suite, Packages, NoPyTorch)", err)
			}
			m, err := reg.Start(spec)
			if err != nil {
				return imageError(err)
			}
			ans = m
		}
		return nil
	}()
	writeJSON(w, h, ans, err)
}
