package server

import (
	"context"
	"errors"
	"time"

	"github.com/haleproject/hale/internal/store"
	"gopkg.in/ini.v1"
)

// ConsoleSignInURL returns a one-time sign-in URL of the web console for the admin key (the
// [hale] profile of CredentialsFile, or the oldest key when that file is gone), and when it
// expires: what hale up prints. hale console asks a running server for one over the API.
func (a *App) ConsoleSignInURL() (string, time.Time, error) {
	id := ""
	if f, err := ini.Load(a.CredentialsFile); err == nil {
		id = f.Section(Profile).Key("aws_access_key_id").String()
	}
	if id == "" {
		err := a.Store.Read(context.Background(), func(tx store.Tx) error {
			keys, err := tx.ListAccessKeys()
			if err == nil && len(keys) > 0 {
				id = keys[0].ID
			}
			return err
		})
		if err != nil {
			return "", time.Time{}, err
		}
	}
	if id == "" {
		return "", time.Time{}, errors.New("the server has no access key")
	}
	url, exp := a.Console.SignInURL(a.URL, id)
	return url, exp, nil
}
