package main

import "errors"

type brokerUpCmd struct{}

func (c *brokerUpCmd) Run() error { return errors.New("not implemented yet") }
